package cloudhost

import "testing"

func TestECR(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host            string
		account, region string
		ok              bool
	}{
		{"123456789012.dkr.ecr.ap-northeast-1.amazonaws.com", "123456789012", "ap-northeast-1", true},
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com:443", "123456789012", "us-east-1", true},
		{"123456789012.DKR.ECR.EU-WEST-1.AMAZONAWS.COM", "123456789012", "eu-west-1", true},
		{"123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "123456789012", "us-gov-west-1", true},
		{"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", "123456789012", "cn-north-1", true},
		{"123456789012.dkr-ecr.eu-central-1.on.aws", "123456789012", "eu-central-1", true},
		{"12345678901.dkr.ecr.us-east-1.amazonaws.com", "", "", false},   // 11 digits
		{"1234567890123.dkr.ecr.us-east-1.amazonaws.com", "", "", false}, // 13 digits
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example", "", "", false},
		{"evil.example/123456789012.dkr.ecr.us-east-1.amazonaws.com", "", "", false},
		{"123456789012.dkr.ecr.amazonaws.com", "", "", false},
		{"public.ecr.aws", "", "", false},
		{"gcr.io", "", "", false},
		{"", "", "", false},
	} {
		account, region, ok := ECR(tc.host)
		if account != tc.account || region != tc.region || ok != tc.ok {
			t.Errorf("ECR(%q) = %q, %q, %v; want %q, %q, %v", tc.host, account, region, ok, tc.account, tc.region, tc.ok)
		}
	}
}

func TestGoogle(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"gcr.io":                      true,
		"GCR.IO":                      true,
		"eu.gcr.io":                   true,
		"us.gcr.io:443":               true,
		"marketplace.gcr.io":          true,
		"us-docker.pkg.dev":           true,
		"europe-west1-docker.pkg.dev": true,
		"docker.pkg.dev":              false,
		"-docker.pkg.dev":             false,
		"a.b-docker.pkg.dev":          false,
		"us-docker.pkg.dev.evil.test": false,
		"gcr.io.evil.test":            false,
		"evilgcr.io":                  false,
		"us-maven.pkg.dev":            false,
		"docker.io":                   false,
		"":                            false,
	} {
		if got := Google(host); got != want {
			t.Errorf("Google(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestACR(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host, cloud string
		ok          bool
	}{
		{"example.azurecr.io", "azurecr.io", true},
		{"Example.AzureCR.io", "azurecr.io", true},
		{"example.azurecr.io:443", "azurecr.io", true},
		{"example-dnl0abc.azurecr.io", "azurecr.io", true},
		{"example.westeurope.data.azurecr.io", "azurecr.io", true},
		{"example.azurecr.cn", "azurecr.cn", true},
		{"example.azurecr.us", "azurecr.us", true},
		{"azurecr.io", "", false},
		{".azurecr.io", "", false},
		{"-example.azurecr.io", "", false},
		{"example.azurecr.de", "", false},
		{"azurecr.io.example.com", "", false},
		{"example.azurecr.io.evil.test", "", false},
		{"evilazurecr.io", "", false},
		{"evil.test/example.azurecr.io", "", false},
		{"mcr.microsoft.com", "", false},
		{"", "", false},
	} {
		cloud, ok := ACR(tc.host)
		if cloud != tc.cloud || ok != tc.ok {
			t.Errorf("ACR(%q) = %q, %v; want %q, %v", tc.host, cloud, ok, tc.cloud, tc.ok)
		}
	}
}
