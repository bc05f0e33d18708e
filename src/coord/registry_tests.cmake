gapless_test(
    registry_itest SOURCES registry_itest.cc LIBS gapless_coord LABEL integration FIXTURES redis)
