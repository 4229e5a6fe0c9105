# Debian packages of the install components (cmake/DlmInstall.cmake):
#   cpack -G DEB --config <build>/CPackConfig.cmake
# in a build configured with -DCMAKE_INSTALL_PREFIX=/usr (scripts/package.sh
# does both). dpkg-shlibdeps (package dpkg-dev) fills in the libraries each
# binary package needs from the archive.
set(CPACK_PACKAGE_NAME dlm)
set(CPACK_PACKAGE_VENDOR "dlm developers")
set(CPACK_PACKAGE_CONTACT "dlm developers <dlm@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY (nor a DESCRIPTION in project()):
# CPack's DEB generator puts a summary set there as the first line, the
# synopsis, of every package's Description, above the package's own
# CPACK_DEBIAN_<COMPONENT>_DESCRIPTION, so all four read alike. Without it,
# the first line of each package's own description is its synopsis
# (scripts/check-packages.sh checks them with dpkg-deb). The lines after
# it are written without the leading space of a control file: CPack adds
# one (a line that starts with one already gets two, which Debian shows
# verbatim, unwrapped).
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev dlmctl schema)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dlmctl links libdlm.so.1 of this build: where dpkg-shlibdeps finds it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libdlm1)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "dlm distributed lock manager - shared library
Named, TTL-bounded locks kept in a PostgreSQL database shared by many
instances of a service, or in an SQLite file on one host. C++17.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlm-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libdlm1 (= ${PROJECT_VERSION})")
# dlm-postgres.pc and dlm-sqlite.pc require libpqxx's and SQLite's own .pc
# files: only programs that hand dlm their own transaction use them. A
# program on plain libpq (dlm::LibpqTransaction) uses libpq's own libpq.pc.
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libpqxx-dev, libpq-dev, libsqlite3-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "dlm distributed lock manager - development files
Headers, the CMake package (find_package(dlm)) and the pkg-config files
of libdlm: dlm.pc, and dlm-postgres.pc and dlm-sqlite.pc for programs
that hand dlm their own libpqxx or SQLite transaction.")
set(CPACK_DEBIAN_DLMCTL_PACKAGE_NAME dlmctl)
set(CPACK_DEBIAN_DLMCTL_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_DLMCTL_PACKAGE_DEPENDS "libdlm1 (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DLMCTL_DESCRIPTION
  "dlm distributed lock manager - operators' command line
Lists held locks and their waiters, force-releases, applies schema
migrations and runs a command under a lock (dlmctl exec), on PostgreSQL
or SQLite.")
set(CPACK_DEBIAN_SCHEMA_PACKAGE_NAME dlm-schema)
set(CPACK_DEBIAN_SCHEMA_PACKAGE_SECTION database)
set(CPACK_DEBIAN_SCHEMA_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_SCHEMA_DESCRIPTION
  "dlm distributed lock manager - database schema and migrations
The PostgreSQL and SQLite schema of dlm and its numbered migrations, for
DBAs who apply them by hand (/usr/share/dlm).")

include(CPack)
