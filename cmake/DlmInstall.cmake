# What `cmake --install` puts where, in four components, one Debian package
# each (`cpack -G DEB`, docs/packaging.md):
#   runtime  libdlm1      the shared library
#   dev      libdlm-dev   headers, the CMake package, dlm.pc, dlm-postgres.pc
#                         and dlm-sqlite.pc (and libdlm.a when
#                         BUILD_SHARED_LIBS is OFF)
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
# dlmctl finds the libdlm.so.1 of its own install wherever that is
# (`cmake --install build --prefix /opt/dlm`): its run path is the library
# directory relative to itself, $ORIGIN/../<libdir>. An install whose
# library directory the linker searches anyway (/usr/lib/<triplet>: the
# Debian packages, a DESTDIR staging for /usr) drops it again, judged at
# install time from the prefix it installs to (cmake/DlmInstallTime.cmake):
# a binary under /usr carries no run path, as Debian wants of packaged
# binaries (lintian's custom-library-search-path; docs/packaging.md says
# why even an $ORIGIN one, which lintian lets pass, goes).
get_target_property(DLM_LIBRARY_TYPE dlm TYPE)
if(DLM_LIBRARY_TYPE STREQUAL "SHARED_LIBRARY")
  file(RELATIVE_PATH DLM_BIN_TO_LIB "${CMAKE_INSTALL_FULL_BINDIR}"
    "${CMAKE_INSTALL_FULL_LIBDIR}")
  set_target_properties(dlmctl PROPERTIES INSTALL_RPATH "$ORIGIN/${DLM_BIN_TO_LIB}")
  set(DLM_SYSTEM_LIBRARY_DIRS ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES}
    ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
  list(REMOVE_DUPLICATES DLM_SYSTEM_LIBRARY_DIRS)
  install(CODE "
    include(\"${PROJECT_SOURCE_DIR}/cmake/DlmInstallTime.cmake\")
    dlm_drop_system_run_path(\"${CMAKE_INSTALL_BINDIR}/$<TARGET_FILE_NAME:dlmctl>\"
      \"${CMAKE_INSTALL_LIBDIR}\" \"${DLM_SYSTEM_LIBRARY_DIRS}\")"
    COMPONENT dlmctl)
endif()
install(FILES docs/man/dlmctl.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
  COMPONENT dlmctl)
install(DIRECTORY include/dlm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT dev)
install(DIRECTORY schema migrations DESTINATION ${CMAKE_INSTALL_DATADIR}/dlm
  COMPONENT schema)

# find_package(dlm 1.0): any 1.x satisfies it.
install(EXPORT dlmTargets NAMESPACE dlm:: DESTINATION ${DLM_CMAKE_DIR}
  COMPONENT dev)
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
# would make their .pc files (dev packages) necessary. dlm.pc is configured
# at install time (cmake/DlmInstallTime.cmake), so that its prefix= is the
# one it is installed under, not the one the build was configured with.
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
install(CODE "
  include(\"${PROJECT_SOURCE_DIR}/cmake/DlmInstallTime.cmake\")
  dlm_install_configured(\"${PROJECT_SOURCE_DIR}/cmake/dlm.pc.in\"
    \"${CMAKE_INSTALL_LIBDIR}/pkgconfig/dlm.pc\"
    PROJECT_VERSION \"${PROJECT_VERSION}\"
    CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\"
    CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\"
    DLM_PC_CFLAGS \"${DLM_PC_CFLAGS}\"
    DLM_PC_LIBS_PRIVATE \"${DLM_PC_LIBS_PRIVATE}\")"
  COMPONENT dev)
# A program that hands dlm its own transaction (dlm::PostgresTransaction,
# dlm::SqliteTransaction) uses libpqxx or SQLite itself: `pkg-config
# --cflags --libs dlm-postgres` (dlm and libpqxx) or `dlm-sqlite` (dlm and
# sqlite3). Only these two need the dependency's development files. One on
# plain libpq (dlm::LibpqTransaction) names libpq's own module: `pkg-config
# --cflags --libs dlm libpq`.
foreach(store postgres sqlite)
  string(TOUPPER "${store}" STORE)
  if(DLM_WITH_${STORE})
    configure_file(cmake/dlm-${store}.pc.in
      "${CMAKE_CURRENT_BINARY_DIR}/dlm-${store}.pc" @ONLY)
    install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlm-${store}.pc"
      DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
  endif()
endforeach()

# Each package carries the licence where Debian looks for it.
foreach(pair "runtime;libdlm1" "dev;libdlm-dev" "dlmctl;dlmctl"
             "schema;dlm-schema")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
    RENAME copyright COMPONENT ${component})
endforeach()

include(cmake/DlmPackages.cmake)
