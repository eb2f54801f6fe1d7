# CPACK_PRE_BUILD_SCRIPTS for the .deb (CMakeLists.txt): the install rules
# put the config and the systemd unit under the prefix (so that
# `cmake --install build --prefix DIR` keeps everything under DIR); a
# system package wants them at /etc/revis and /lib/systemd/system. Run on
# the staging directory after CPack installed into it, before the package
# is made: moves PREFIX/etc and PREFIX/lib/systemd to the root.
set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
set(prefix "${root}${CPACK_PACKAGING_INSTALL_PREFIX}")
foreach(pair "${CPACK_REVIS_SYSCONFDIR};etc" "${CPACK_REVIS_SYSTEMD_UNIT_DIR};lib/systemd/system")
  list(GET pair 0 from)
  list(GET pair 1 to)
  if(IS_ABSOLUTE "${from}" OR NOT EXISTS "${prefix}/${from}")
    continue()  # configured absolute: installed where it belongs already
  endif()
  get_filename_component(parent "${root}/${to}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(RENAME "${prefix}/${from}" "${root}/${to}")
  # Drop the directories the move left empty (PREFIX/lib/systemd's parent).
  get_filename_component(left "${prefix}/${from}" DIRECTORY)
  while(NOT left STREQUAL prefix)
    file(GLOB entries "${left}/*")
    if(entries)
      break()
    endif()
    file(REMOVE_RECURSE "${left}")
    get_filename_component(left "${left}" DIRECTORY)
  endwhile()
endforeach()
