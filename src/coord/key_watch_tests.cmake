# Tests of the memory watch (included by src/coord/CMakeLists.txt).
gapless_test(key_watch_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/key_watch_test.cc
  LIBS gapless_coord gapless_core)
gapless_test(key_watch_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/key_watch_itest.cc
  LIBS gapless_coord gapless_testing_redis gapless_core
  LABEL integration FIXTURES redis)
