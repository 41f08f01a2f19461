# cmake -DDOC=docs/library.md -DLIBRARY_DIR=examples/library -P library_doc.cmake
# The how-to shows each program of examples/library in full, as the tests build and run it.
file(READ ${DOC} doc)
foreach(f mlp.cpp cnn.cpp tensors.cpp CMakeLists.txt)
  file(READ ${LIBRARY_DIR}/${f} text)
  string(FIND "${doc}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${DOC} does not show examples/library/${f} as it is: copy it into the how-to again")
  endif()
endforeach()
