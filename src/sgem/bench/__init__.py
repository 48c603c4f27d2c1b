"""The benchmark library: what the scripts in `benchmarks/` run, in one place.

Each script there parses its arguments and calls into these modules (one job each):

* `config`: the forecasting scales (smoke / offline / paper) and their command-line
  overrides as a run config; the `key=value` override parser;
* `tasks`: a benchmark task, built by the package's own task builder (one build path;
  the seasonal period comes from the data, `sgem.data.timeseries`);
* `methods`: the forecasting methods of the tables (SGEM and the baselines), their labels,
  their shared budget and running SGEM; `rows`: SGEM's row on a finished search (every
  row is `sgem.methods.MethodResult.row`);
* `stats`: relative scores, summaries over seeds and paired bootstrap comparisons;
* `tables`: the forecasting table as JSON and markdown, re-rendering and merging outputs;
* `forecasting`: one forecasting table run end to end (Table ts_main);
* `replay`: a saved table's final stage retrained under another final protocol;
* `images`, `images_tables`: the image benchmark (Table cifar_main);
* `scaling`: one scaling run and its plot; `machine`: load and platform of the machine;
* `user_tables`: scikit-learn's bundled tables split as a user's, and scikit-learn on them.

Nothing here is imported by the rest of the package (it sits above every layer), and
importing it loads no optional library (statsforecast is loaded only by the methods that
use it, when they run).
"""
