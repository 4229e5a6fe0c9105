# What `cmake --install` puts where, in four components, one Debian package
# each (`cpack -G DEB`, docs/packaging.md):
#   runtime  libdlm1      the shared library
#   dev      libdlm-dev   headers, the CMake package, dlm.pc (and libdlm.a
#                         when BUILD_SHARED_LIBS is OFF)
#   dlmctl   dlmctl       the operators' command and its manual page
#   schema   dlm-schema   schema/ and migrations/ for DBAs
include(CMakePackageConfigHelpers)

set(DLM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlm)

install(TARGETS dlm EXPORT dlmTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
    NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS dlmctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT dlmctl)
install(FILES docs/man/dlmctl.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  COMPONENT dlmctl)
install(DIRECTORY include/dlm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT dev)
install(DIRECTORY schema migrations DESTINATION ${CMAKE_INSTALL_DATADIR}/dlm
  COMPONENT schema)

# find_package(dlm 1.0): any 1.x satisfies it.
install(EXPORT dlmTargets NAMESPACE dlm:: DESTINATION ${DLM_CMAKE_DIR}
  COMPONENT dev)
get_target_property(DLM_LIBRARY_TYPE dlm TYPE)
if(DLM_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  set(DLM_STATIC ON)
else()
  set(DLM_STATIC OFF)
endif()
configure_package_config_file(cmake/dlmConfig.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/dlmConfig.cmake"
  INSTALL_DESTINATION ${DLM_CMAKE_DIR})
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/dlmConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlmConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/dlmConfigVersion.cmake"
  DESTINATION ${DLM_CMAKE_DIR} COMPONENT dev)

# pkg-config: `pkg-config --cflags --libs dlm`. The dependencies are named
# as plain -l flags for a static link (--static) rather than as
# Requires.private, which pkg-config resolves even for a shared link and
# would make their .pc files (dev packages) necessary.
get_target_property(DLM_DEFINITIONS dlm_api INTERFACE_COMPILE_DEFINITIONS)
list(TRANSFORM DLM_DEFINITIONS PREPEND "-D")
list(JOIN DLM_DEFINITIONS " " DLM_PC_CFLAGS)
set(DLM_PC_LIBS_PRIVATE "-lfmt")
if(DLM_WITH_POSTGRES)
  string(APPEND DLM_PC_LIBS_PRIVATE " -lpqxx -lpq -lcrypto")
endif()
if(DLM_WITH_SQLITE)
  string(APPEND DLM_PC_LIBS_PRIVATE " -lsqlite3")
endif()
string(APPEND DLM_PC_LIBS_PRIVATE " -pthread")
configure_file(cmake/dlm.pc.in "${CMAKE_CURRENT_BINARY_DIR}/dlm.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlm.pc"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Each package carries the licence where Debian looks for it.
foreach(pair "runtime;libdlm1" "dev;libdlm-dev" "dlmctl;dlmctl"
             "schema;dlm-schema")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
    RENAME copyright COMPONENT ${component})
endforeach()

include(cmake/DlmPackages.cmake)
