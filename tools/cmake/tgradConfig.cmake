# find_package(tgrad) for an installed tgrad (make install): the imported
# targets tgrad::tgrad (float) and tgrad::tgrad-double (double, defines
# TG_DOUBLE), each present when that flavour is installed (the flavours
# install side by side, each with its tgrad*-targets.cmake here).
#   find_package(tgrad 0.2 REQUIRED)
#   target_link_libraries(prog PRIVATE tgrad::tgrad)
get_filename_component(_tgrad_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include(CMakeFindDependencyMacro)
file(GLOB _tgrad_flavours "${CMAKE_CURRENT_LIST_DIR}/tgrad*-targets.cmake")
foreach(_tgrad_f IN LISTS _tgrad_flavours)
  include("${_tgrad_f}")
endforeach()
if(NOT TARGET tgrad::tgrad AND NOT TARGET tgrad::tgrad-double)
  set(tgrad_FOUND FALSE)
  set(tgrad_NOT_FOUND_MESSAGE "no tgrad flavour is installed in ${_tgrad_prefix}")
endif()
unset(_tgrad_f)
unset(_tgrad_flavours)
