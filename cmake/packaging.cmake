# `cpack -G DEB` in a build directory: the gapless .deb (docs/operations.md "Packages"). The
# binary, the systemd units (gapless-leader.service, gapless-worker@.service), a sample
# /etc/gapless/gapless.conf (a conffile), the docs, and a postinst that creates the gapless
# system user. Dependencies are found by dpkg-shlibdeps.
# cpack needs only what it installs built, not every test (the test suite packs its own build).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
install(TARGETS gapless RUNTIME DESTINATION bin)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/gapless-leader.service
              ${CMAKE_SOURCE_DIR}/packaging/gapless-worker@.service
        DESTINATION lib/systemd/system)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/gapless.conf DESTINATION /etc/gapless)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/operations.md
        DESTINATION share/doc/gapless)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gapless)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gapless maintainers <gapless@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "crash-safe EVM blockchain indexer: JSON-RPC to PostgreSQL, coordinated through Redis")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_SOURCE_DIR}/packaging/postinst;${CMAKE_SOURCE_DIR}/packaging/postrm;${CMAKE_SOURCE_DIR}/packaging/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
