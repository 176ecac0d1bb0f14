package pmml

