module utls.test/erninterop

go 1.21
