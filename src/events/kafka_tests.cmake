# Tests of the Kafka bus (included by src/events/CMakeLists.txt). The test starts its own mock
# Kafka cluster through the helper process gapless-kafka-mock (src/testing), so no fixture.
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/kafka_bus.cc)
  gapless_test(kafka_bus_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/kafka_bus_itest.cc
    LIBS gapless_events gapless_testing_kafka gapless_testing_proxy PkgConfig::RDKAFKA
    LABEL integration TIMEOUT 120)
  target_compile_definitions(kafka_bus_itest PRIVATE
    GAPLESS_KAFKA_MOCK_BIN="$<TARGET_FILE:gapless-kafka-mock>")
  add_dependencies(kafka_bus_itest gapless-kafka-mock)
  # Longest first under `ctest -j` (tests/CMakeLists.txt says why).
  set_tests_properties(kafka_bus_itest PROPERTIES COST 80)
endif()
