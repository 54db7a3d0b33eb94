module github.com/dlock/dlock

go 1.26.8

require go.uber.org/goleak v1.3.0 // indirect
