module vpaweb/tools/gomath-reference

go 1.19
