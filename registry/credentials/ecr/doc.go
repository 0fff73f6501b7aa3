// Package ecr is the credentials Source for Amazon ECR: it trades the pod's
// AWS identity (optionally after assuming a role) for an ECR authorization
// token, for registry hosts of the form <account>.dkr.ecr.<region>.amazonaws.com.
package ecr
