# install_python.cmake - run by `cmake --install`: installs the fusertrace_capture package, with
# _installed.py naming where the recorder library went, into the site directory of FT_PYTHON
# (the environment's, else the configured one) or, without one, FT_PY_DIR under the prefix.
# FT_PY_SRC, FT_PY_DIR, FT_PY_CONF and FT_LIBDIR are set by the install rules (CMakeLists.txt).
set(_py "$ENV{FT_PYTHON}")
if(NOT _py)
  set(_py "${FT_PY_CONF}")
endif()
if(_py)
  execute_process(COMMAND "${_py}" -c "import sysconfig; print(sysconfig.get_path('purelib'))"
    OUTPUT_VARIABLE _dest OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 OR NOT _dest)
    message(FATAL_ERROR "FT_PYTHON=${_py}: cannot ask it for its site-packages (is it a Python "
                        "interpreter?)")
  endif()
else()
  set(_dest "${CMAKE_INSTALL_PREFIX}/${FT_PY_DIR}")
endif()
file(INSTALL "${FT_PY_SRC}" DESTINATION "$ENV{DESTDIR}${_dest}" PATTERN __pycache__ EXCLUDE)
file(WRITE "$ENV{DESTDIR}${_dest}/fusertrace_capture/_installed.py"
  "# written by cmake --install: where the recorder library was installed\n"
  "LIBDIR = '${CMAKE_INSTALL_PREFIX}/${FT_LIBDIR}'\n")
if(_py)
  message(STATUS "fusertrace_capture for ${_py}: ${_dest}/fusertrace_capture")
else()
  message(STATUS "fusertrace_capture: ${_dest}/fusertrace_capture")
endif()
