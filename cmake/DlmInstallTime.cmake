# What an install computes from the prefix it installs to, which
# `cmake --install build --prefix /opt/dlm` may change after configuring.
# Included by the install scripts that cmake/DlmInstall.cmake generates
# (install(CODE)), never at configure time: there CMAKE_INSTALL_PREFIX is
# the prefix of this install, and DESTDIR, if set, a staging directory put
# in front of it. CPack's DEB generator installs that way too (prefix /usr,
# DESTDIR its staging directory).
cmake_policy(VERSION 3.21)

# dlm_install_configured(TEMPLATE DESTINATION [VARIABLE VALUE]...):
# configure_file(@ONLY) of TEMPLATE into DESTINATION (relative to the
# prefix), with each VARIABLE set to VALUE and CMAKE_INSTALL_PREFIX the
# prefix of this install; recorded in install_manifest.txt like any
# installed file.
function(dlm_install_configured template destination)
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs name value)
    set(${name} "${value}")
  endwhile()
  set(file "${CMAKE_INSTALL_PREFIX}/${destination}")
  message(STATUS "Installing: $ENV{DESTDIR}${file}")
  configure_file("${template}" "$ENV{DESTDIR}${file}" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${file}")
  set(CMAKE_INSTALL_MANIFEST_FILES "${CMAKE_INSTALL_MANIFEST_FILES}" PARENT_SCOPE)
endfunction()

# dlm_drop_system_run_path(FILE LIBDIR SYSTEM_DIRS): removes the run path
# of the installed FILE (relative to the prefix) when this install's LIBDIR
# is one of SYSTEM_DIRS, the directories the linker searches by default
# (/usr/lib/<triplet>, /usr/lib, ...): there the run path would only repeat
# the default search. Elsewhere (/opt/dlm/lib, /usr/local/lib) it stays.
function(dlm_drop_system_run_path file libdir system_dirs)
  cmake_path(SET dir NORMALIZE "${CMAKE_INSTALL_PREFIX}/${libdir}")
  string(REGEX REPLACE "(.)/$" "\\1" dir "${dir}")
  list(FIND system_dirs "${dir}" found)
  if(found GREATER -1)
    message(STATUS "No run path in $ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${file}: ${dir} is searched by default")
    file(RPATH_REMOVE FILE "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${file}")
  endif()
endfunction()
