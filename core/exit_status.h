#pragma once
// The exit statuses of strata's programs (examples/, bench/), as GNU tools use them:
// 0 success (also --help and --version), 1 a runtime error (a file that cannot be
// read, a diverged run), 2 a usage error (an unknown option, a bad or missing value,
// options that contradict each other).
namespace strata {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// CLI11's exit code for a parse error (App::exit's return: 0 for --help and
// --version, 100+ for the errors) as one of the statuses above.
inline int usage_exit_status(int cli11_exit_code) { return cli11_exit_code == 0 ? kExitSuccess : kExitUsage; }

}  // namespace strata

// CLI11_PARSE with these statuses, for a main() that includes <CLI/CLI.hpp>: --help and
// --version print and return 0, a parse error prints CLI11's message and returns 2.
#define STRATA_CLI11_PARSE(app, argc, argv)                      \
  try {                                                          \
    (app).parse((argc), (argv));                                 \
  } catch (const CLI::ParseError& strata_cli11_error) {          \
    return ::strata::usage_exit_status((app).exit(strata_cli11_error)); \
  }
