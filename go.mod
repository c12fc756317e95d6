module github.com/leash-go/leash

go 1.26.0
