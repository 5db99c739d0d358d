module bashcall

go 1.25.0

require (
	github.com/BurntSushi/toml v1.6.0
	golang.org/x/sys v0.46.0
)

require github.com/google/go-cmp v0.7.0
