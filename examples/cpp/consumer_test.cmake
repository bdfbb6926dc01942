# examples/cpp/consumer_test.cmake -- ctest examples.cpp (cmake -P): configures examples/cpp as
# a separate project against the install prefix (find_package(psa)), builds and runs it.
#   -DSOURCE_DIR=<examples/cpp> -DWORK_DIR=<dir> -DPREFIX=<install prefix>
#   -DGENERATOR=<generator> -DCXX=<compiler>
cmake_minimum_required(VERSION 3.22)
file(REMOVE_RECURSE "${WORK_DIR}")
macro(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endmacro()
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}"
     -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
string(FIND "${out}" "from ${PREFIX}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "find_package(psa) did not use the install prefix ${PREFIX}")
endif()
step(${CMAKE_COMMAND} --build "${WORK_DIR}")
step("${WORK_DIR}/psa_cpp_example")
