# fraglab_add_layer(NAME FOLDER folder [SOURCES_FROM dir...] LINKS target...)
#
# One layer of fraglab (docs/architecture.md) as a static library `fraglab_<NAME>`, alias
# `fraglab::<NAME>`, built from the .cpp files of its folder (globbed, so a new policy or reader is
# just a new file) and linking only the layers below it.
#
# Why the include facade: every header is included by its path from the repository root
# ("traces/trace.h"). Were the root an include directory, any file could include any layer. Instead
# each layer exposes a directory holding one symbolic link, <build>/layers/<NAME>/<FOLDER> -> the
# folder, and a target sees only its own facade and those of the layers it links. An include that
# runs back up the layers ("sim/replay.h" from allocators/) then fails to compile: the file is not
# found. Installed, every layer's headers sit under include/fraglab/<folder>/, so the same include
# lines work against the package.
function(fraglab_layer_facade target name folder)
  set(facade ${CMAKE_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${facade})
  file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${folder} ${facade}/${folder} SYMBOLIC)
  # Installed, both "traces/trace.h" (include/fraglab) and <fraglab/traces/trace.h> (include) resolve.
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${facade}>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/fraglab>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endfunction()

function(fraglab_add_layer name)
  cmake_parse_arguments(L "" "FOLDER" "SOURCES_FROM;LINKS" ${ARGN})
  set(sources)
  foreach(dir ${L_FOLDER} ${L_SOURCES_FROM})
    file(GLOB found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cpp)
    list(APPEND sources ${found})
  endforeach()
  add_library(fraglab_${name} STATIC ${sources})
  add_library(fraglab::${name} ALIAS fraglab_${name})
  set_target_properties(fraglab_${name} PROPERTIES EXPORT_NAME ${name})
  fraglab_layer_facade(fraglab_${name} ${name} ${L_FOLDER})
  target_link_libraries(fraglab_${name} PUBLIC ${L_LINKS})
  target_compile_features(fraglab_${name} PUBLIC cxx_std_20)
endfunction()
