# Runs one command and checks how it ended: the exact exit code, a pattern its output must match,
# optionally one it must not match, and never a sanitizer report or a source path of the build.
#
#   cmake -DEXPECT_EXIT=<code> -DEXPECT_OUTPUT=<regex> [-DREJECT_OUTPUT=<regex>] [-DWORKING_DIR=<dir>]
#         -P expect_exit.cmake -- <program> [args...]
#
# (After `--`, cmake passes the arguments on without reading them: `--preset` is one of its own.)
#
# ctest's WILL_FAIL passes on any non-zero exit, a crash or an ASan report included, and
# PASS_REGULAR_EXPRESSION ignores the exit code: neither can tell "a clear error" from a crash.
cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED EXPECT_EXIT OR NOT DEFINED EXPECT_OUTPUT)
  message(FATAL_ERROR "expect_exit.cmake: EXPECT_EXIT and EXPECT_OUTPUT are required")
endif()

# The command is everything after the script's own path (and a `--`) on cmake's command line.
set(command)
set(after_script FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 0 ${last})
  if(after_script)
    if(NOT command AND NOT separator_seen AND CMAKE_ARGV${i} STREQUAL "--")
      set(separator_seen TRUE)
    else()
      list(APPEND command "${CMAKE_ARGV${i}}")
    endif()
  elseif(CMAKE_ARGV${i} STREQUAL "-P")
    math(EXPR script_index "${i} + 1")
  elseif(DEFINED script_index AND i EQUAL script_index)
    set(after_script TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "expect_exit.cmake: no command given after the script")
endif()
if(NOT DEFINED WORKING_DIR)
  set(WORKING_DIR "${CMAKE_CURRENT_BINARY_DIR}")
endif()

execute_process(COMMAND ${command}
                WORKING_DIRECTORY "${WORKING_DIR}"
                RESULT_VARIABLE code
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(all "${out}${err}")
string(REPLACE ";" " " shown "${command}")

set(problems)
if(NOT code STREQUAL "${EXPECT_EXIT}")
  list(APPEND problems "exit code ${code}, expected ${EXPECT_EXIT}")
endif()
if(NOT all MATCHES "${EXPECT_OUTPUT}")
  list(APPEND problems "output does not match '${EXPECT_OUTPUT}'")
endif()
if(DEFINED REJECT_OUTPUT AND NOT REJECT_OUTPUT STREQUAL "" AND all MATCHES "${REJECT_OUTPUT}")
  list(APPEND problems "output matches '${REJECT_OUTPUT}', which it must not")
endif()
if(all MATCHES "(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error: |terminate called)")
  list(APPEND problems "a sanitizer report or an uncaught exception in the output")
endif()
# A message for users never carries a path of the machine that built sieve.
if(all MATCHES "/src/[a-z_/]+\\.(cpp|h):[0-9]+")
  list(APPEND problems "a source path of the build in the output")
endif()

if(problems)
  string(REPLACE ";" "\n  " listed "${problems}")
  message(FATAL_ERROR "${shown}\n  ${listed}\n--- output ---\n${all}")
endif()
message(STATUS "${shown}: exit ${code} as expected")
