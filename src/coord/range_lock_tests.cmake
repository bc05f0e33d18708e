# The Kafka block source's range locks and completion markers (included by
# src/coord/CMakeLists.txt), on the shared test redis-server.
gapless_test(range_lock_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/range_lock_itest.cc
  LIBS gapless_coord gapless_testing_redis gapless_core
  LABEL integration FIXTURES redis)
