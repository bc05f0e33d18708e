# Tests of the HA leader's lock nodes, election and elector (included by src/coord/CMakeLists.txt).
# The integration test starts private redis-servers of its own (it kills and restarts them).
gapless_test(election_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/election_itest.cc
  LIBS gapless_coord gapless_testing_redis gapless_core
  LABEL integration TIMEOUT 300)
