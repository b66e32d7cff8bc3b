# cmake -DCPU=a.json -DPART=b.json -DKEY=name -P merge-json.cmake
# Sets a.json's top-level KEY to b.json (or to b.json's own KEY member when it
# has one, so that {"name": {...}} is not nested twice). a.json is created if
# absent.
file(READ ${PART} part)
string(JSON inner ERROR_VARIABLE no_inner GET "${part}" ${KEY})
if(NOT no_inner)
    set(part "${inner}")
endif()
if(EXISTS ${CPU})
    file(READ ${CPU} whole)
else()
    set(whole "{}")
endif()
string(JSON whole SET "${whole}" ${KEY} "${part}")
file(WRITE ${CPU} "${whole}\n")
