module utls.test/gopeer

go 1.21
