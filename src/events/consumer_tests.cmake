# The consumer framework (events/consumer.h) and the balances service (events/balances.h).
gapless_test(consumer_test SOURCES consumer_test.cc LIBS gapless_events)
