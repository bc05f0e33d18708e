# Tests of the HA leader's lock nodes, election and elector (included by src/coord/CMakeLists.txt).
# The integration tests start private redis-servers of their own (they kill and restart them):
# election_itest (leadership: one leader, deposed leaders, lost nodes, takeover) and
# election_head_log_itest (the head log's repairs and truncations); what they share is
# election_itest_util.h.
foreach(t election_itest election_head_log_itest)
  gapless_test(${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.cc
    LIBS gapless_coord gapless_testing_redis gapless_testing_proxy gapless_core
    LABEL integration TIMEOUT 300)
endforeach()
