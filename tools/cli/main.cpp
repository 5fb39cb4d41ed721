// The sieve command line: one subcommand per job.
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
    CLI::App app{"sieve: sparse-attention inference engine"};
    app.require_subcommand(1);
    CLI11_PARSE(app, argc, argv);
    return 0;
}
