"""What is read off runs after they finish: figures (routing, convergence, image
representatives, cells), the operation-effect table (`sgem ops`) and the paper's
architecture-spread row.

Nothing is imported here, so matplotlib and scipy load only with the module that needs them.
"""
