# `sieve check` verdicts: a dead indexer and hostile references fail, raw references pass
# (golden_format.md). Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.
