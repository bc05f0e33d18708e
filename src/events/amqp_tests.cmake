# The RabbitMQ bus against a real broker: the shared fixture node (scripts/rabbitmq.sh) and, for
# the stop/restart test, a private node (testing/RabbitMqServer). Included by CMakeLists.txt.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/amqp_bus_itest.cc)
  gapless_test(amqp_bus_itest SOURCES amqp_bus_itest.cc
    LIBS gapless_events gapless_testing_amqp PkgConfig::RABBITMQ
    LABEL integration FIXTURES amqp TIMEOUT 300)
endif()
