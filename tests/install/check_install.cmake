# The installed package works outside sieve's tree (ctest: install.consumer):
#   1. `cmake --install` the build into a fresh prefix;
#   2. the installed headers are the whole public set (include/sieve) and stand alone: one unit
#      including every one of them compiles against the prefix and fmt only;
#   3. a consumer project (tests/install/consumer) finds the package with find_package(sieve),
#      builds, links libsieve and runs a fixture's attention layers;
#   4. the same program builds from `pkg-config --cflags --libs sieve` and runs.
# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCHECKPOINT=... -DCXX=... -P check_install.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR CHECKPOINT CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_install.cmake: -D${var}= is required")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# 2. The public set, installed whole, standing alone.
file(GLOB_RECURSE source_headers RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/sieve/*.h)
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/sieve/*.h)
list(SORT source_headers)
list(SORT installed_headers)
if(NOT source_headers STREQUAL installed_headers OR NOT source_headers)
  message(FATAL_ERROR "installed headers differ from include/sieve:\n  source: ${source_headers}\n  installed: ${installed_headers}")
endif()
set(all_headers_unit ${WORK_DIR}/all_headers.cpp)
file(WRITE ${all_headers_unit} "")
foreach(header ${installed_headers})
  file(APPEND ${all_headers_unit} "#include \"${header}\"\n")
endforeach()
run_step("compiling every installed header against the prefix alone"
         ${CXX} -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I${prefix}/include ${all_headers_unit})
list(LENGTH installed_headers n_headers)
message(STATUS "${n_headers} public headers installed; they compile against the prefix alone")

# 3. find_package(sieve).
set(consumer_build ${WORK_DIR}/consumer-cmake)
run_step("configuring the consumer with find_package(sieve)"
         ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${consumer_build}
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release)
run_step("building the consumer" ${CMAKE_COMMAND} --build ${consumer_build})
run_step("running the find_package consumer" ${consumer_build}/sieve_consumer ${CHECKPOINT})
message(STATUS "find_package consumer: ${step_output}")
if(NOT step_output MATCHES "([0-9]+) of ([0-9]+) output rows" OR NOT CMAKE_MATCH_1 EQUAL CMAKE_MATCH_2)
  message(FATAL_ERROR "the find_package consumer's report is not whole: ${step_output}")
endif()

# 4. pkg-config.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB_RECURSE pc_file ${prefix}/*/sieve.pc)
if(NOT pc_file)
  message(FATAL_ERROR "no sieve.pc under ${prefix}")
endif()
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run_step("pkg-config --cflags --libs sieve" ${PKG_CONFIG} --cflags --libs sieve)
string(STRIP "${step_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run_step("pkg-config --variable=libdir sieve" ${PKG_CONFIG} --variable=libdir sieve)
string(STRIP "${step_output}" libdir)
run_step("building the consumer from pkg-config's flags"
         ${CXX} ${SOURCE_DIR}/tests/install/consumer/main.cpp ${pc_flags} -Wl,-rpath,${libdir}
         -o ${WORK_DIR}/sieve_consumer_pc)
run_step("running the pkg-config consumer" ${WORK_DIR}/sieve_consumer_pc ${CHECKPOINT})
message(STATUS "pkg-config consumer: ${step_output}")
if(NOT step_output MATCHES "([0-9]+) of ([0-9]+) output rows" OR NOT CMAKE_MATCH_1 EQUAL CMAKE_MATCH_2)
  message(FATAL_ERROR "the pkg-config consumer's report is not whole: ${step_output}")
endif()
