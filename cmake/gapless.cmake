# Helpers shared by every module's CMakeLists.

# gapless_test(NAME SOURCES a.cc b.cc LIBS x y [LABEL unit|integration] [FIXTURES name...])
# A *_test.cc runs without servers (label "unit"); a *_itest.cc needs real servers
# (label "integration") and declares the CTest fixtures that start them.
function(gapless_test name)
  cmake_parse_arguments(T "" "LABEL;TIMEOUT" "SOURCES;LIBS;FIXTURES" ${ARGN})
  if(NOT T_LABEL)
    set(T_LABEL unit)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    GAPLESS_FIXTURES_DIR="${GAPLESS_SHARED_DIR}/fixtures"
    GAPLESS_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    GAPLESS_BINARY_DIR="${CMAKE_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT})
  if(T_FIXTURES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${T_FIXTURES}")
  endif()
  # Integration tests find their servers through the environment. Each test creates its own
  # database on the shared test server (see testing/pg_test_db.h), so tests do not interfere.
  set_tests_properties(${name} PROPERTIES ENVIRONMENT
    "GAPLESS_TEST_PG_URL=postgresql://gapless@127.0.0.1:${GAPLESS_TEST_PG_PORT}/postgres;GAPLESS_ANVIL=${GAPLESS_ANVIL};GAPLESS_TEST_REDIS_URL=redis://127.0.0.1:${GAPLESS_TEST_REDIS_PORT};GAPLESS_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:${GAPLESS_TEST_AMQP_PORT}")
endfunction()

# gapless_embed(TARGET VAR FILES...): generates a header with the files' contents as
# string_view constants, so SQL migrations and scripts ship inside the binary.
function(gapless_embed target header_name)
  cmake_parse_arguments(E "" "NAMESPACE" "FILES" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/generated/${header_name}")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNS=${E_NAMESPACE} "-DFILES=${E_FILES}"
            -P ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${E_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "Embedding ${header_name}"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
  target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_BINARY_DIR}/generated")
endfunction()
