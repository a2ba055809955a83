module serverlab/contestants/go-nethttp

go 1.24
