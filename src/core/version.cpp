#include "sieve/version.h"

namespace sieve {

std::string_view library_version() { return SIEVE_VERSION_STRING; }

}  // namespace sieve
