// Package cloudhost tells the registries the clouds run from their host
// names, without linking the clouds' SDKs: the registry client chooses a
// credential source by host, and only the sources need the SDKs.
package cloudhost

import (
	"net"
	"regexp"
	"strings"
)

// ecrHostRE matches private ECR registry hosts: the classic and FIPS names in
// the aws and aws-cn partitions, and the dual-stack names under on.aws.
var ecrHostRE = regexp.MustCompile(`^([0-9]{12})\.(?:dkr\.ecr(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-[0-9]+)\.amazonaws\.com(?:\.cn)?|dkr-ecr(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-[0-9]+)\.on\.aws)$`)

// ECR reads the registry (AWS account) ID and region from a private
// ECR registry host such as 123456789012.dkr.ecr.eu-west-1.amazonaws.com.
// A port, if any, is ignored. ok is false for any other host.
func ECR(host string) (accountID, region string, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	m := ecrHostRE.FindStringSubmatch(strings.ToLower(host))
	if m == nil {
		return "", "", false
	}
	region = m[2]
	if region == "" {
		region = m[3]
	}
	return m[1], region, true
}

var googleHostRE = regexp.MustCompile(`^(?:(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*gcr\.io|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?-docker\.pkg\.dev)$`)

// Google reports whether host is a registry run by Google: gcr.io,
// a subdomain of gcr.io, or an Artifact Registry host
// <location>-docker.pkg.dev. A port, if any, is ignored.
func Google(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return googleHostRE.MatchString(strings.ToLower(host))
}

// acrHostRE matches Azure Container Registry hosts, <name>.azurecr.io, in
// Azure's public cloud and its China and US Government clouds.
var acrHostRE = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(azurecr\.(?:io|cn|us))$`)

// ACR reports whether host is an Azure Container Registry host and in which
// of Azure's clouds, given as the hosts' suffix: "azurecr.io" (public),
// "azurecr.cn" (China) or "azurecr.us" (US Government). A port, if any,
// is ignored.
func ACR(host string) (cloud string, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	m := acrHostRE.FindStringSubmatch(strings.ToLower(host))
	if m == nil {
		return "", false
	}
	return m[1], true
}
