# cmake/install.cmake -- install rules and packaging: psa.h, libpsa.so (SONAME = major),
# the CMake package psa::psa (SameMajorVersion) and psa.pc. Included by the top level.
# yaml-cpp, cxxopts and the CUDA runtime never appear in what a consumer links: libpsa
# links them privately (cudart statically) and the header includes none of them.
include(CMakePackageConfigHelpers)

set(PSA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/psa" CACHE STRING
    "Where the CMake package files go, relative to the prefix")
set(PSA_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where psa.pc goes, relative to the prefix")
mark_as_advanced(PSA_INSTALL_CMAKEDIR PSA_INSTALL_PKGCONFIGDIR)

# ---- library and header -------------------------------------------------------------
install(TARGETS psa EXPORT psaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          COMPONENT Runtime NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
# The reference preset file, for psa_config_load_file users and `psa check-config`.
install(FILES "${PROJECT_SOURCE_DIR}/configs/attention_config.yaml"
  DESTINATION ${CMAKE_INSTALL_DATADIR}/psa COMPONENT Runtime)

# ---- CMake package: find_package(psa 0 REQUIRED) -> psa::psa --------------------------
install(EXPORT psaTargets NAMESPACE psa:: DESTINATION ${PSA_INSTALL_CMAKEDIR}
  COMPONENT Development)
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/psaConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/packaging/psaConfig.cmake"
  INSTALL_DESTINATION ${PSA_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/packaging/psaConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/packaging/psaConfig.cmake"
              "${PROJECT_BINARY_DIR}/packaging/psaConfigVersion.cmake"
  DESTINATION ${PSA_INSTALL_CMAKEDIR} COMPONENT Development)

# ---- pkg-config --------------------------------------------------------------------
# Installed psa.pc: the prefix is found from the .pc file's own place (${pcfiledir}), so
# the tree can be moved or installed with `cmake --install --prefix`.
if(IS_ABSOLUTE "${PSA_INSTALL_PKGCONFIGDIR}")
  set(PSA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  set(PSA_PC_PREFIX "\${pcfiledir}")
  set(_psa_rest "${PSA_INSTALL_PKGCONFIGDIR}")
  while(NOT _psa_rest STREQUAL "" AND NOT _psa_rest STREQUAL ".")
    get_filename_component(_psa_rest "${_psa_rest}" DIRECTORY)
    string(APPEND PSA_PC_PREFIX "/..")
  endwhile()
endif()
foreach(_psa_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_psa_dir}}")
    set(PSA_PC_${_psa_dir} "${CMAKE_INSTALL_${_psa_dir}}")
  else()
    set(PSA_PC_${_psa_dir} "\${prefix}/${CMAKE_INSTALL_${_psa_dir}}")
  endif()
endforeach()
configure_file("${PROJECT_SOURCE_DIR}/pkgconfig/psa.pc.in"
  "${PROJECT_BINARY_DIR}/packaging/psa.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/packaging/psa.pc"
  DESTINATION ${PSA_INSTALL_PKGCONFIGDIR} COMPONENT Development)

# Build-tree psa.pc in <build>/pkgconfig: PKG_CONFIG_PATH=<build>/pkgconfig finds the
# library being built (the Rust crates' tests use it).
set(PSA_PC_PREFIX "${PROJECT_BINARY_DIR}")
set(PSA_PC_LIBDIR "${PROJECT_BINARY_DIR}")
set(PSA_PC_INCLUDEDIR "${PROJECT_SOURCE_DIR}/include")
get_target_property(_psa_libdir psa LIBRARY_OUTPUT_DIRECTORY)
if(_psa_libdir)
  set(PSA_PC_LIBDIR "${_psa_libdir}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/pkgconfig/psa.pc.in"
  "${PROJECT_BINARY_DIR}/pkgconfig/psa.pc" @ONLY)
set(PSA_BUILD_PKGCONFIG_DIR "${PROJECT_BINARY_DIR}/pkgconfig")

# ---- the version test: psa.h is the only source of the version -----------------------
if(PSA_BUILD_TESTS)
  enable_testing()
  add_test(NAME packaging.versions
    COMMAND ${CMAKE_COMMAND}
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DCMAKE_PROJECT_VERSION_=${PROJECT_VERSION}
      "-DPC_FILES=${PROJECT_BINARY_DIR}/packaging/psa.pc;${PROJECT_BINARY_DIR}/pkgconfig/psa.pc"
      -DCONFIG_VERSION_FILE=${PROJECT_BINARY_DIR}/packaging/psaConfigVersion.cmake
      -P ${CMAKE_CURRENT_LIST_DIR}/check_versions.cmake)
  set_tests_properties(packaging.versions PROPERTIES LABELS cpu)
endif()
