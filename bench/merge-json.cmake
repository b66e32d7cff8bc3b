# cmake -DCPU=a.json -DPART=b.json -DKEY=name -P merge-json.cmake
# Sets a.json's top-level KEY to the object in b.json (a.json created if absent).
file(READ ${PART} part)
if(EXISTS ${CPU})
    file(READ ${CPU} whole)
else()
    set(whole "{}")
endif()
string(JSON whole SET "${whole}" ${KEY} "${part}")
file(WRITE ${CPU} "${whole}\n")
