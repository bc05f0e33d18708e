# The consumer framework (events/consumer.h) and the balances service (events/balances.h).
# (src/testing is added after src/events; its targets resolve at generate time.)
# consumer_test: the framework (consumer_test.cc) and ordered consumption (consumer_order_test.cc),
# on the fixture of consumer_test_fixture.h.
gapless_test(consumer_test SOURCES consumer_test.cc consumer_order_test.cc LIBS gapless_events)
gapless_test(consumer_itest SOURCES consumer_itest.cc
  LIBS gapless_events gapless_testing_redis LABEL integration FIXTURES redis)
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/balances.cc)
  gapless_test(balances_itest SOURCES balances_itest.cc
    LIBS gapless_balances gapless_testing_pg gapless_testing_redis fmt::fmt
    LABEL integration FIXTURES pg redis)
endif()
