// The version of the sieve library a program runs with (the project() version of CMakeLists.txt).
#pragma once

#include <string_view>

namespace sieve {

// "MAJOR.MINOR.PATCH"
std::string_view library_version();

}  // namespace sieve
