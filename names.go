package sbx

// validName reports whether name is 1 to max bytes of ASCII letters,
// digits, '.', '_' and '-', starting with a letter or digit: the rule of
// pool and snapshot names. It is a loop, not a regexp: a {0,N} repetition
// compiles into N copies (0.3-0.6 ms and up to 118 KB), which every process
// linking this package (the sbx CLI, sbx-executor) would pay at start.
func validName(name string, max int) bool {
	if name == "" || len(name) > max {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}
