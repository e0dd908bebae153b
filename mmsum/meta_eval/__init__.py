"""Meta-evaluation: do metric scores agree with human factuality judgments?

`loaders` read the benchmark releases (MuFaME, WikiHowFact, FOIL, BISON, FRANK) into `Pair`s;
`stats` holds correlations with bootstrap intervals, the Williams test and ranking accuracy;
`harness` scores the pairs with the requested metrics, fits the CLIPBERTScore combiners on the
validation split and writes the per-example scores, a table and a bar plot. The command line is
`mmsum-meta-eval benchmark=<name> path=<file or dir> metrics=[...]` (mmsum/cli/meta_eval.py).
"""
