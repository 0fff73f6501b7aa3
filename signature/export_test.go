package signature

// Bounds the tests of package signature_test check.
const (
	MaxSignatures = maxSignatures
	CacheSize     = cacheSize
)

// Verdicts is how many verdicts v keeps.
func (v *Verifier) Verdicts() int { return v.verdicts.Len() }
