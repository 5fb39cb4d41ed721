# `sieve bench` as a user meets it: its verdict, noisy points, the --svg path.
# Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.
