# Non-finite inputs and the scalar ISA under the sanitizers.
# Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.
