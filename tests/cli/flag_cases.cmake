# Numeric flags and hostile values: every one is range-checked with a message naming it (exit 2).
# Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.
