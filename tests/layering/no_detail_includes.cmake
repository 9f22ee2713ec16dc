# cmake -DROOT=<dir> -DFOLDERS="sim;report;..." -P no_detail_includes.cmake
#
# allocators/detail/ is the allocators layer's own machinery (block lists, bins, key indexes); what other
# layers use of it is public under allocators/ (the PyTorch model: allocators/pytorch/). Fails, naming each
# file and line, where a file under ROOT/<folder> includes an allocators/detail/ header.
set(found "")
foreach(folder ${FOLDERS})
  file(GLOB_RECURSE sources ${ROOT}/${folder}/*.h ${ROOT}/${folder}/*.cpp ${ROOT}/${folder}/*.cu)
  foreach(source ${sources})
    file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<](fraglab/)?allocators/detail/")
    foreach(line ${lines})
      file(RELATIVE_PATH name ${ROOT} ${source})
      string(APPEND found "  ${name}: ${line}\n")
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "includes allocators/detail/ from outside allocators/:\n${found}")
endif()
message(STATUS "no file under ${FOLDERS} includes allocators/detail/")
