module herald.dev/herald/hack/kind/whoami

go 1.26
