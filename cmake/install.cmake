# Install rules and the package config for find_package(memrec). Included by recorder/CMakeLists.txt when
# MEMREC_INSTALL is ON. Needs memrec_format's include directory wrapped in $<BUILD_INTERFACE:...> (exported
# targets may not point into the source tree, so no headers carried in .deps either).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(_memrec_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/memrec)
set(MEMREC_CEREAL_IS_PACKAGE ${cereal_FOUND})  # else memrec_cereal is a plain include directory

set_target_properties(memrec_recorder PROPERTIES EXPORT_NAME recorder)
set_target_properties(memrec_format PROPERTIES EXPORT_NAME format)
set_target_properties(memrec_torch PROPERTIES EXPORT_NAME torch)
set_target_properties(memrec_cereal PROPERTIES EXPORT_NAME cereal)
install(TARGETS memrec_recorder memrec_format memrec_torch memrec_cereal EXPORT memrecTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The headers a library user needs: the recorder's API and reading the files it writes.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/recorder/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/format/include/memrec/snapshot.h ${PROJECT_SOURCE_DIR}/format/include/memrec/packed_vector.h
              ${PROJECT_SOURCE_DIR}/format/include/memrec/huge_pages.h ${PROJECT_SOURCE_DIR}/format/include/memrec/format.h
              ${PROJECT_SOURCE_DIR}/format/include/memrec/load.h ${PROJECT_SOURCE_DIR}/format/include/memrec/pickle.h
              ${PROJECT_SOURCE_DIR}/format/include/memrec/range.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memrec)
install(EXPORT memrecTargets NAMESPACE memrec:: DESTINATION ${_memrec_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/memrecConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/memrecConfig.cmake INSTALL_DESTINATION ${_memrec_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/memrecConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/memrecConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/memrecConfigVersion.cmake
        DESTINATION ${_memrec_cmake_dir})
